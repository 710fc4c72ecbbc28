{{- define "gvDetails" -}}
{{- $gv := . -}}
# {{ $gv.GroupVersionString }}

_Generated from the Go types in `apis/cache/{{ $gv.Version }}` by `make api-docs` (crd-ref-docs);
edit the types' comments and markers, not this page._

{{ template "prose" $gv.Doc }}

## Resource types
{{ range $gv.SortedKinds }}
- {{ $gv.TypeForKind . | markdownRenderTypeLink }}
{{- end }}

## Types
{{ range $gv.SortedTypes }}
{{- template "type" . }}
{{- end }}
{{- end -}}

{{- /* prose renders a doc comment as Markdown paragraphs. */ -}}
{{- define "prose" -}}
{{ regexReplaceAll "([^\n])\n([^\n])" (. | replace "&" "&amp;" | replace "<" "&lt;" | replace ">" "&gt;" | replace "*" "\\*") "${1} ${2}" }}
{{- end -}}
