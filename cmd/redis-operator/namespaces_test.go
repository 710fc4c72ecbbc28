package main

import (
	"slices"
	"testing"
)

func TestSplitNamespaces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"redis", []string{"redis"}},
		{"a, b,,a ,c", []string{"a", "b", "c"}},
	} {
		if got := splitNamespaces(c.in); !slices.Equal(got, c.want) {
			t.Errorf("splitNamespaces(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
