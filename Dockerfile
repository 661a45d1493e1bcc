# syntax=docker/dockerfile:1
# Kontinue's image: one static binary on distroless, running as non-root.
#   docker build --build-arg VERSION=v1.2.3 -t kontinue:latest .   (make image IMAGE=... stamps git describe)
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 .

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
# The version `kontinue version` prints: make image passes git describe.
ARG VERSION=dev
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# CGO off: a static binary that needs no libc in the final image.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X kontinue.dev/kontinue/version.Version=${VERSION}" -o /out/kontinue .

# distroless/static: CA certificates, /etc/passwd with "nonroot" (65532), no
# shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kontinue /kontinue
# Numeric, so that the kubelet can check runAsNonRoot without a passwd lookup.
USER 65532:65532
# The Deployment's args start with `controller`; run bare, the binary prints help.
ENTRYPOINT ["/kontinue"]
