# dedupd with the example handlers, for docker-compose.yml (not exercised by the tests:
# no Docker engine runs where this project is built and tested).
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      librdkafka-dev libpq-dev libyaml-dev libjansson-dev libssl-dev libcmocka-dev && \
    rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -G Ninja -DDEDUPD_TESTS=OFF && ninja -C /build

FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 libpq5 libyaml-0-2 libjansson4 libssl3 && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /build/dedupd /build/dedupctl /usr/local/bin/
COPY --from=build /build/transfer.so /usr/local/lib/dedupd/
COPY config/transfer.yaml /etc/dedupd/transfer.yaml
ENV DEDUPD_HANDLER_DIR=/usr/local/lib/dedupd
USER nobody
ENTRYPOINT ["dedupd", "-c", "/etc/dedupd/transfer.yaml"]
