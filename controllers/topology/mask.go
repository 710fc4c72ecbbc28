package topology

import "strings"

// mask replaces every non-empty secret in msg with "***": the engine's errors carry Redis's
// replies, and Redis echoes arguments in some of them (an ACL SETUSER modifier, password
// included; a CONFIG SET value).
func mask(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	return msg
}
