package backup

import (
	"context"

	"github.com/minio/minio-go/v7"
)

// RemovePrefix deletes every object under prefix (which should end with
// "/", so that a backup's prefix does not match another whose name starts
// with it), then aborts the multipart uploads left there. It returns how
// many objects it deleted. Errors: as Check's, naming the object.
func (s *Store) RemovePrefix(ctx context.Context, prefix string) (int, error) {
	n := 0
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return n, s.classify(o.Err, prefix)
		}
		if err := s.client.RemoveObject(ctx, s.bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			return n, s.classify(err, o.Key)
		}
		n++
	}
	return n, s.AbortIncomplete(ctx, prefix)
}
