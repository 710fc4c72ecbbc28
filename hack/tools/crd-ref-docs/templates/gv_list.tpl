{{- /* crd-ref-docs' markdown templates (github.com/elastic/crd-ref-docs v0.3.0,
templates/markdown, Apache-2.0), changed for one page per API version built by mkdocs:
the version is the page's title, and every doc comment is escaped for Python-Markdown
(wrapped lines joined; <, >, & and * escaped) so that "<name>" or a line starting with "#" in a
comment is shown as written. */ -}}
{{- define "gvList" -}}
{{- range . }}
{{- template "gvDetails" . }}
{{- end }}
{{- end -}}
