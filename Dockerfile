# podslo's image for people with Docker (BuildKit). `make image` builds the
# same image without Docker or a registry; both run `make build`, so the
# binary is stamped the same way, and hack/image's tests keep this file's
# user and entrypoint in step with it.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(cat VERSION) --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/podslo/podslo:$(cat VERSION) .
#
# The build context must include .git: make build reads the revision,
# branch and commit date from it.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH BUILD_USER=docker make build

FROM gcr.io/distroless/static:nonroot
ARG VERSION REVISION
LABEL org.opencontainers.image.title=podslo \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.source=https://github.com/podslo/podslo \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /src/bin/podslo /podslo
COPY --from=build /src/bin/podslo-exporter /podslo-exporter
USER 65532:65532
ENTRYPOINT ["/podslo"]
