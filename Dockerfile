# aimon-gw as a resident gateway: `mcp --listen` serves MCP over streamable
# HTTP and Claude Code's HTTP hook (see deploy/kubernetes/ and the README).
# Build: docker build -t aimon-gw .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: the runtime image needs no C library of the build's.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/aimon-gw ./cmd/aimon-gw

FROM debian:bookworm-slim
# bubblewrap is the sandbox a command runs in (rules R6, R8); ca-certificates
# for an issuer's JWKS and OTLP over TLS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 aimon \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/aimon --create-home --shell /usr/sbin/nologin aimon
COPY --from=build /out/aimon-gw /usr/local/bin/aimon-gw
# Nothing the gateway reads or runs is writable by the user it runs as (rule R8).
USER 10001:10001
WORKDIR /home/aimon
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/aimon-gw"]
CMD ["mcp", "--listen", ":8080"]
