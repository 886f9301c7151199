# syntax=docker/dockerfile:1
# Build: make docker
#        or docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t sluice .
#        (.git is not in the build context: without VERSION, `sluice version` says dev)
# Run:   docker run -p 6363:6363 -v sluice-data:/data sluice       (embedded Postgres, data in the /data volume)
#        docker run -p 6363:6363 -e SLUICE_DATABASE_URL=postgres://… sluice

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The same command as `make docker-binary`, which CI runs. GraphiQL's
# browser files are committed (internal/graphiql/assets) and embedded, so
# the build needs no npm and no network beyond Go modules.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice

# The runtime carries the Postgres server binaries for the embedded default.
FROM debian:bookworm-slim
ARG VERSION=dev
LABEL org.opencontainers.image.title="Sluice" \
      org.opencontainers.image.version="${VERSION}"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data sluice \
 && mkdir -p /data && chown sluice:sluice /data
COPY --from=build /out/sluice /usr/local/bin/sluice
ENV SLUICE_LISTEN=:6363 \
    SLUICE_DATA_DIR=/data \
    SLUICE_PG_BIN_DIR=/usr/lib/postgresql/15/bin
VOLUME /data
EXPOSE 6363
USER sluice
# Ready means GET /readyz answers 200 on SLUICE_LISTEN (or the config
# file's listen): Postgres reachable, migrations applied, change feed
# running. The first start runs initdb, hence the start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/sluice", "healthcheck", "--timeout", "4s"]
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
