package credentials

import (
	"context"
	"fmt"
)

// FetchKeys logs in if needed and reads several keys of one version of the
// secret (for example an access key pair), so that they always belong
// together; the config's Key is not read. It returns the values in keys'
// order and the version, as Credential.Version. Errors: as Fetch's, naming
// the first key missing or not a non-empty string.
func (s *VaultSource) FetchKeys(ctx context.Context, keys ...string) ([]Password, string, error) {
	var out []Password
	var ver string
	err := s.withToken(ctx, func() error {
		secret, where, version, err := s.readSecret(ctx)
		if err != nil {
			return err
		}
		out = make([]Password, len(keys))
		for i, k := range keys {
			if out[i], err = pick(secret, k, where, version); err != nil {
				return err
			}
		}
		ver = fmt.Sprintf("vault:%s#v%d", where, version)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, ver, nil
}
