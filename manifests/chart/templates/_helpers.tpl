{{/*
The image: repository:tag, the tag defaulting to the chart's appVersion (the
version of the binary, as manifests/base's `images` entry).
*/}}
{{- define "interlock.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The CA that signed the serving certificate, base64 (the webhooks' caBundle
and the Secret's ca.crt), in mode interlock-certs.
*/}}
{{- define "interlock.caBundle" -}}
{{ required "certificates.caCrt: the CA of `interlock certs` (--set-file certificates.caCrt=certs/ca.crt)" .Values.certificates.caCrt | b64enc }}
{{- end }}

{{/*
The namespaces no webhook sees: Interlock's own and
webhook.excludedNamespaces, sorted, each once.
*/}}
{{- define "interlock.excludedNamespaces" -}}
{{- concat (list .Values.namespace) .Values.webhook.excludedNamespaces | uniq | sortAlpha | toYaml }}
{{- end }}

{{/* Refuses values the templates cannot render faithfully. */}}
{{- define "interlock.validate" -}}
{{- if not (has .Values.certificates.mode (list "interlock-certs" "cert-manager")) }}
{{- fail (printf "certificates.mode must be interlock-certs or cert-manager, not %q" .Values.certificates.mode) }}
{{- end }}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) }}
{{- fail (printf "webhook.failurePolicy must be Fail or Ignore, not %q" .Values.webhook.failurePolicy) }}
{{- end }}
{{- end }}
