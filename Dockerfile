# syntax=docker/dockerfile:1
# Kontinue's image, the same as `make release` assembles without Docker
# (hack/release): the static binary alone on scratch, run as the numeric
# user 65532, built with the release's flags (TestDockerfileBuildsTheReleaseImage
# compares them). The binary carries its own CA roots (main.go imports
# golang.org/x/crypto/x509roots/fallback), so the image needs no CA bundle.
#   docker build --build-arg VERSION=v0.1.0 -t REGISTRY/kontinue:v0.1.0 .
# Without VERSION the binary says version/VERSION-dev (make image passes VERSION
# only when given). Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 .

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
# The version `kontinue version` prints, for a release.
ARG VERSION=
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# CGO off: a static binary that needs no libc in the final image.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -buildid= -X kontinue.dev/kontinue/version.Version=${VERSION}" -o /out/kontinue .

# No base: no shell, no package manager, no files but the binary. The
# Deployment mounts /tmp (emptyDir) and the ServiceAccount's token.
FROM scratch
COPY --from=build /out/kontinue /kontinue
# Numeric, so that the kubelet can check runAsNonRoot without a passwd lookup.
USER 65532:65532
# The Deployment's args start with `controller`; run bare, the binary prints help.
ENTRYPOINT ["/kontinue"]
