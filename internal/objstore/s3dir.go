package objstore

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Copy copies the object at from to to with a server-side CopyObject,
// replacing any object at to (S3's CopyObject takes no If-None-Match).
// Objects up to 5 GiB.
func (s *S3) Copy(ctx context.Context, from, to string) error {
	segs := strings.Split(s.bucket+"/"+s.key(from), "/")
	for i, g := range segs {
		segs[i] = url.PathEscape(g)
	}
	_, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(to)),
		CopySource: aws.String(strings.Join(segs, "/"))})
	if err != nil {
		return s.wrap(err, "copy "+from+" to", to)
	}
	return nil
}

// ListDir lists the objects directly under the directory dir (a
// delimiter listing: deeper keys are left out) with their names relative
// to dir, sizes and modification times.
func (s *S3) ListDir(ctx context.Context, dir string) ([]ObjectInfo, error) {
	prefix := s.key(strings.Trim(dir, "/")) + "/"
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix), Delimiter: aws.String("/")}
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap(err, "list", dir)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			out = append(out, ObjectInfo{Key: name, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Exists says whether an object is at key (HeadObject).
func (s *S3) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key))})
	if err == nil {
		return true, nil
	}
	err = s.wrap(err, "head", key)
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return false, err
}
