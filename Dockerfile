# Builds the jobstore binary and runs it on a slim Debian image.
FROM rust:1-bookworm AS build
WORKDIR /src
# What the build reads: the workspace's manifests and lock file (bench/ is a member, so cargo
# loads its manifest; its sources are not built here), build.rs and what it reads
# (src/store/sql, migrations), and the sources. scripts/docker-check.py runs this stage on a
# copy of exactly these paths.
COPY Cargo.toml Cargo.lock build.rs ./
COPY bench/Cargo.toml ./bench/
COPY migrations ./migrations
COPY src ./src
COPY templates ./templates
RUN cargo build --release --locked --bin jobstore

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/jobstore --create-home jobstore
COPY --from=build /src/target/release/jobstore /usr/local/bin/jobstore
USER jobstore
WORKDIR /var/lib/jobstore
EXPOSE 8090
ENV JOBSTORE_LISTEN=0.0.0.0:8090
HEALTHCHECK --interval=5s --timeout=3s CMD curl -fsS http://127.0.0.1:8090/readyz || exit 1
ENTRYPOINT ["jobstore"]
CMD ["serve"]
