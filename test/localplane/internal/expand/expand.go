// Package expand implements Kubernetes' $(VAR) reference expansion, used for
// env values, command, args and subPathExpr ("Define a command and arguments
// for a container" and the EnvVar.Value field doc in the core/v1 API):
//
//   - $(NAME) is replaced by NAME's value when mapping knows NAME, and kept
//     verbatim otherwise;
//   - $$ is an escaped $, so $$(NAME) yields the literal $(NAME);
//   - a $ followed by anything else, or an unterminated $(, stays as is.
package expand

import "strings"

// Mapping returns the value of name and whether it is defined.
type Mapping func(name string) (string, bool)

// MapOf returns a Mapping over m.
func MapOf(m map[string]string) Mapping {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// String expands the references in s through mapping.
func String(s string, mapping Mapping) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := mapping(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// All expands every element of list.
func All(list []string, mapping Mapping) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = String(s, mapping)
	}
	return out
}
