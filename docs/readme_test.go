package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeLink is a relative Markdown link of the README: [text](path#anchor).
var readmeLink = regexp.MustCompile(`\]\(([^):#]+)(#[^)]*)?\)`)

// TestReadmeLinksExist: every relative link of the README, which the site
// does not build (mkdocs checks the links of docs/ only), names a file of
// the repository, and there are links into the docs.
func TestReadmeLinksExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	intoDocs := 0
	for _, m := range readmeLink.FindAllStringSubmatch(string(raw), -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("README links to %s: %v", m[1], err)
		}
		if strings.HasPrefix(m[1], "docs/") {
			intoDocs++
		}
	}
	if intoDocs < 10 {
		t.Errorf("the README has %d links into docs/", intoDocs)
	}
}
