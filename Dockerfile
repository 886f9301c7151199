# syntax=docker/dockerfile:1
# Build: make docker
#        or docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t sluice .
#        (.git is not in the build context: without VERSION, `sluice version` says dev)
#        or buildah bud --format docker -t sluice .   (podman build --format docker: an OCI image
#        has no HEALTHCHECK, so without it the image is never "healthy")
# Run:   docker run -p 6363:6363 -v sluice-data:/data sluice       (embedded Postgres, data in the /data volume)
#        docker run -p 6363:6363 -e SLUICE_DATABASE_URL=postgres://… sluice
#        (docs/operations.md: bind mounts, --read-only, stop timeouts, Compose)

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
# - postgresql-common would create a "main" cluster on install (39 MB);
#   Sluice makes its own in /data/pg.
# - JIT is off in every Sluice session and in the embedded server, and
#   LLVM serves only JIT: the libraries of libllvm14 (107 MB) and of the
#   z3 solver it alone needs (23 MB) are deleted with the server's JIT
#   module and bitcode. Only their files: the packages stay installed as
#   far as dpkg knows (postgresql-15 depends on libllvm14), so apt-get
#   install works in an image built FROM this one (a purge with
#   --force-depends left dpkg inconsistent, and apt refused every
#   install); apt-get install --reinstall libllvm14 libz3-4 brings them
#   back.
# - tini is PID 1: it forwards SIGTERM to Sluice and reaps any orphan
#   (Sluice also reaps the backends of an embedded server that died).
# - A uid above the system range, so useradd does not warn; give a bind
#   mount this owner (see docs/operations.md).
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/sluice.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 ca-certificates tini \
 && rm -rf /usr/lib/postgresql/15/lib/llvmjit.so /usr/lib/postgresql/15/lib/llvmjit_types.bc /usr/lib/postgresql/15/lib/bitcode \
 && dpkg-query -L libllvm14 libz3-4 | grep '^/usr/lib/' | while read -r f; do if [ -f "$f" ] || [ -L "$f" ]; then rm -f "$f"; fi; done \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/lib/postgresql/15 /etc/postgresql/15 \
 && useradd --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin sluice \
 && mkdir -p /data && chown sluice:sluice /data
COPY --from=build /out/sluice /usr/local/bin/sluice
# shutdown_timeout: the drain of requests and streams on SIGTERM. 6 s
# leaves Postgres 4 s of Docker's default 10 s grace (docker stop,
# Compose) for its clean shutdown; Kubernetes gives 30 s. With a longer
# drain, raise the grace too (docker run --stop-timeout, Compose
# stop_grace_period, terminationGracePeriodSeconds).
ENV SLUICE_LISTEN=:6363 \
    SLUICE_DATA_DIR=/data \
    SLUICE_PG_BIN_DIR=/usr/lib/postgresql/15/bin \
    SLUICE_SHUTDOWN_TIMEOUT=6s
VOLUME /data
EXPOSE 6363
USER 10001:10001
STOPSIGNAL SIGTERM
# Ready means GET /readyz answers 200 on SLUICE_LISTEN (or the config
# file's listen): Postgres reachable, migrations applied, change feed
# running. The first start runs initdb, hence the start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/sluice", "healthcheck", "--timeout", "4s"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sluice"]
CMD ["serve"]
