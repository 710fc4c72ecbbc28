{{- define "type_members" -}}
{{- if eq .Name "metadata" -}}
Refer to Kubernetes API documentation for fields of `metadata`.
{{- else -}}
{{ template "cell" .Doc }}
{{- end -}}
{{- end -}}

{{- /* cell renders a doc comment in one table cell: paragraphs kept apart by a line break. */ -}}
{{- define "cell" -}}
{{ markdownRenderFieldDoc (regexReplaceAll "([^\n])\n([^\n])" (. | replace "&" "&amp;" | replace "<" "&lt;" | replace ">" "&gt;" | replace "*" "\\*") "${1} ${2}") }}
{{- end -}}
