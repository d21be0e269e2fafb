# aimon-gw as a resident gateway: `mcp --listen` serves MCP over streamable
# HTTP and Claude Code's HTTP hook (see deploy/kubernetes/ and the README).
# Build: docker build --build-arg REVISION=$(git rev-parse HEAD) -t aimon-gw .
# Without a registry, give bases of your own (.ci/image builds them from
# Debian packages): --build-arg GO_IMAGE=… --build-arg BASE_IMAGE=…

ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The revision is given, since .git is not in the build's context.
ARG REVISION=""
# Static: the runtime image needs no C library of the build's. Both
# binaries in one build: the gateway and, beside it, its sandbox program,
# which each sandboxed command starts instead of the gateway's binary.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X main.revision=${REVISION}" -o /out/ ./cmd/aimon-gw ./cmd/aimon-gw-sandbox

FROM ${BASE_IMAGE}
# bubblewrap is the sandbox a command runs in (rules R6, R8); ca-certificates
# for an issuer's JWKS and OTLP over TLS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 aimon \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/aimon --create-home --shell /usr/sbin/nologin aimon
COPY --from=build /out/aimon-gw /out/aimon-gw-sandbox /usr/local/bin/
# Nothing the gateway reads or runs is writable by the user it runs as (rule R8).
USER 10001:10001
WORKDIR /home/aimon
# The load cache and the state live in /tmp, which a read-only root file
# system (Kubernetes) mounts writable, and which any --user may write.
ENV XDG_CACHE_HOME=/tmp/aimon-gw/cache XDG_STATE_HOME=/tmp/aimon-gw/state
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/aimon-gw"]
# The policy mounted at /policy, to the callers of a static tokens file
# mounted at /tokens (mode 0600, owned by the user the container runs as)
# whom its principals map.
CMD ["mcp", "--listen", ":8080", "--policy", "/policy", "--tokens", "/tokens"]
