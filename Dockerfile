# The operator's image: `make docker-build` (IMG=... to name it).
# Not built in CI: the CI machines have no container engine.

# Build stage: a static binary (no cgo), so the runtime image needs no libc.
FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Modules first, in their own layer, so a source change reuses the download.
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY health/ health/
COPY kustomize/ kustomize/
COPY webhooks/ webhooks/
# kustomize/ is embedded into the binary (redis-operator manifests).
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/redis-operator ./cmd/redis-operator

# Runtime stage: distroless static, no shell, as the image's non-root user
# 65532 (numeric, so the kubelet can check runAsNonRoot).
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/redis-operator /redis-operator
USER 65532:65532
ENTRYPOINT ["/redis-operator"]
