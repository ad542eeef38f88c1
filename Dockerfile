# syntax=docker/dockerfile:1
# Reactor's container image: one static-ish binary (librdkafka compiled in)
# on a slim Debian, running as a non-root user.
#
#   docker build -t reactor .
#   docker run --rm -v "$PWD/deploy/reactor.toml:/etc/reactor/reactor.toml:ro" \
#     -e REACTOR_BROKERS=kafka:9092 -p 9464:9464 reactor
#
# The default command runs an instance with /etc/reactor/reactor.toml and the
# admin API on 0.0.0.0:9464 (health, readiness, metrics); pass other
# arguments to run another subcommand (`reactor ctl set …`, `reactor tail …`).
# The instance id defaults to the host name (a StatefulSet's pod name);
# REACTOR_INSTANCE_ID overrides it, REACTOR_BROKERS sets the brokers.

# The toolchain CI builds and tests with. The full (non-slim) image brings
# what rdkafka-sys needs to compile librdkafka: a C toolchain, make, perl,
# pkg-config, zlib's and OpenSSL's headers (the `tls` feature: SSL,
# SASL_SSL and SCRAM for managed Kafka services).
ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Everything the `reactor` binary is built from: the manifests (the
# workspace names workers/rust), the schema build.rs compiles, the sources,
# the declared bench target and examples/dev.toml, which `reactor dev` embeds.
COPY Cargo.toml Cargo.lock build.rs ./
COPY schemas/ schemas/
COPY src/ src/
COPY benches/ benches/
COPY examples/ examples/
COPY workers/rust/ workers/rust/
# Without the release profile's line tables: a binary of about 17 MB
# instead of 72 MB; panics still name their functions.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release --locked --features tls --bin reactor \
    && install -D -m 0755 target/release/reactor /out/reactor

FROM debian:${DEBIAN_RELEASE}-slim
# The binary needs libc, libm, libgcc_s and zlib, all in the base image, and
# OpenSSL with the CA certificates for TLS to the brokers. Debian's security
# updates are what keeps these current: not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin reactor
COPY --from=build /out/reactor /usr/local/bin/reactor
COPY deploy/reactor.toml /etc/reactor/reactor.toml
USER 10001:10001
EXPOSE 9464
# /healthz answers while the process runs (readiness is /readyz). The image
# has no HTTP client: bash's /dev/tcp speaks the one request.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["reactor"]
CMD ["run", "--config", "/etc/reactor/reactor.toml", "--admin", "0.0.0.0:9464"]
