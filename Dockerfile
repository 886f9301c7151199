# syntax=docker/dockerfile:1
# Build: docker build -t sluice .
# Run:   docker run -p 6363:6363 sluice                      (embedded Postgres, data in the /data volume)
#        docker run -p 6363:6363 -e SLUICE_DATABASE_URL=postgres://… sluice

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The same command as `make docker-binary`, which CI runs.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice

# The runtime carries the Postgres server binaries for the embedded default.
FROM debian:bookworm-slim
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
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
