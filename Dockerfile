# dedupd with the example handlers, as docker-compose.yml runs it. No container
# engine runs where this project is built and tested, so the image is never
# built by the tests; tests/integration/container.sh checks this file
# statically (Release build, the context, the runtime libraries).
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      librdkafka-dev libpq-dev libyaml-dev libjansson-dev libssl-dev libcurl4-openssl-dev \
      libmicrohttpd-dev libsystemd-dev libnats-dev librabbitmq-dev libunistring-dev && \
    rm -rf /var/lib/apt/lists/*
COPY . /src
# Release, without tests and so without cmocka; fault points stay off (the default).
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEDUPD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX=/usr/local && \
    ninja -C /build dedupd dedupctl transfer sql filesink && \
    DESTDIR=/stage cmake --install /build

FROM debian:12
# The libraries the binaries and handlers link (container.sh compares this list
# with what they need; libmicrohttpd and libsystemd serve /metrics and
# sd_notify, libnats the NATS JetStream source, libcurl4 the RabbitMQ management
# API), and curl for the compose
# healthcheck on /readyz.
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 libpq5 libyaml-0-2 libjansson4 libssl3 libmicrohttpd12 libsystemd0 libnats3.4 librabbitmq4 libunistring2 libcurl4 curl && \
    rm -rf /var/lib/apt/lists/* && \
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin dedupd
COPY --from=build /stage/usr/local /usr/local
COPY config/dedupd.example.yaml /etc/dedupd/dedupd.yaml
ENV DEDUPD_HANDLER_DIR=/usr/local/lib/dedupd
USER dedupd
ENTRYPOINT ["dedupd"]
CMD ["-c", "/etc/dedupd/dedupd.yaml"]
