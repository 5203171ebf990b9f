package s3

import (
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// WithClientOptions returns a copy of b whose S3 client has fns applied
// (tests: a store that ignores If-None-Match).
func (b *Backend) WithClientOptions(fns ...func(*awss3.Options)) *Backend {
	c := *b
	c.st = b.st.WithClientOptions(fns...)
	return &c
}
