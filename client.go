package flightline

// ClientConfig configures a client connection to a Flightline endpoint:
// flightsrc.Dial and flightsink.Dial take it (as flightsrc.ClientConfig and
// flightsink.ClientConfig, which are this type). The zero value dials
// grpc:// URLs in plaintext without credentials.
type ClientConfig struct {
	// CAFile verifies the server for grpc+tls URLs; empty uses the system
	// roots.
	CAFile string
	// CertFile and KeyFile present a client certificate (mTLS).
	CertFile, KeyFile string
	// ServerName overrides the name checked in the server certificate.
	ServerName string
	// Token is sent as "authorization: Bearer <Token>" on every call.
	Token string
}
