package flightline

// MaxMessageSize bounds one gRPC message (one record batch) in both
// directions on every Flightline endpoint and client; gRPC's 4 MiB default
// is too small for 64k-row batches. A gRPC server you build yourself to
// serve a flightsink.Server or flightsrc.Server should allow it:
// grpc.MaxRecvMsgSize(flightline.MaxMessageSize) and
// grpc.MaxSendMsgSize(flightline.MaxMessageSize).
const MaxMessageSize = 512 << 20

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
