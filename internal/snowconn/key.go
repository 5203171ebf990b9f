package snowconn

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"hash"

	"github.com/flightline/flightline"
)

// ParsePrivateKey parses the RSA private key of key-pair authentication
// from PEM: "PRIVATE KEY" (PKCS#8), "RSA PRIVATE KEY" (PKCS#1), or
// "ENCRYPTED PRIVATE KEY" (PKCS#8 with PBES2: PBKDF2 with HMAC-SHA1,
// -SHA256 or -SHA512, and AES-CBC; what `openssl pkcs8 -topk8 -v2 aes256`
// and Snowflake's documentation produce), decrypted with passphrase.
// Errors never contain the key or the passphrase.
func ParsePrivateKey(data, passphrase []byte) (*rsa.PrivateKey, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: snowflake private key: "+f, append([]any{flightline.ErrInvalidInput}, a...)...)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, bad("no PEM block")
	}
	der := block.Bytes
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(der)
		if err != nil {
			return nil, bad("PKCS#1: not an RSA key")
		}
		return k, nil
	case "ENCRYPTED PRIVATE KEY":
		if len(passphrase) == 0 {
			return nil, bad("the key is encrypted and no passphrase was given")
		}
		var err error
		if der, err = decryptPKCS8(der, passphrase); err != nil {
			return nil, bad("%v", err)
		}
	case "PRIVATE KEY":
	default:
		return nil, bad("unexpected PEM block %q", block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		if block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, bad("wrong passphrase (the decrypted key does not parse)")
		}
		return nil, bad("PKCS#8 does not parse")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, bad("not an RSA key (%T); Snowflake key-pair authentication needs RSA", k)
	}
	return rk, nil
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type encryptedPKCS8 struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

func decryptPKCS8(der, passphrase []byte) ([]byte, error) {
	var ep encryptedPKCS8
	if _, err := asn1.Unmarshal(der, &ep); err != nil {
		return nil, fmt.Errorf("encrypted PKCS#8 does not parse")
	}
	if !ep.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption %v is not PBES2 (re-encrypt with `openssl pkcs8 -topk8 -v2 aes256`)", ep.Algo.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(ep.Algo.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("PBES2 parameters do not parse")
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %v is not PBKDF2", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil {
		return nil, fmt.Errorf("PBKDF2 parameters do not parse")
	}
	var h func() hash.Hash
	switch {
	case len(kp.PRF.Algorithm) == 0 || kp.PRF.Algorithm.Equal(oidHMACSHA1):
		h = sha1.New
	case kp.PRF.Algorithm.Equal(oidHMACSHA256):
		h = sha256.New
	case kp.PRF.Algorithm.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, fmt.Errorf("PBKDF2 hash %v not supported", kp.PRF.Algorithm)
	}
	var keyLen int
	switch {
	case p.Cipher.Algorithm.Equal(oidAES128CBC):
		keyLen = 16
	case p.Cipher.Algorithm.Equal(oidAES192CBC):
		keyLen = 24
	case p.Cipher.Algorithm.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("cipher %v not supported (want AES-CBC)", p.Cipher.Algorithm)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Cipher.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("cipher IV does not parse")
	}
	key, err := pbkdf2.Key(h, string(passphrase), kp.Salt, kp.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("PBKDF2: %v", err)
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(ep.Data) == 0 || len(ep.Data)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("ciphertext length %d is not a multiple of the block size", len(ep.Data))
	}
	out := make([]byte, len(ep.Data))
	cipher.NewCBCDecrypter(blk, iv).CryptBlocks(out, ep.Data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || pad > len(out) {
		return nil, fmt.Errorf("wrong passphrase")
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, fmt.Errorf("wrong passphrase")
		}
	}
	return out[:len(out)-pad], nil
}
