# Dockerfile: tessera in a container. Stage 1 builds the Debian package (scripts/package.sh)
# on Debian 12; stage 2 installs it into debian:12-slim and runs `tessera serve` as an
# unprivileged user, models from the /models volume (the built-in stories260K when empty).
#   docker build -t tessera .
#   docker run -p 8080:8080 -v /srv/models:/models:ro tessera
#   docker run -p 8080:8080 -v /srv/models:/models:ro tessera serve --host 0.0.0.0 --port 8080 -m qwen2.5-7b.Q4_K_M
# GIT_COMMIT names the commit in `tessera version` when .git is not in the context.
FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config git ca-certificates dpkg-dev binutils \
      libopenblas-openmp-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG GIT_COMMIT=
# Portable kernels (chosen at start-up from the CPU), no tests or benchmarks.
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF \
      -DTESSERA_BUILD_BENCH=OFF -DTESSERA_GIT_COMMIT="${GIT_COMMIT}" \
    && cmake --build /build -j"$(nproc)" --target tessera \
    && scripts/package.sh /build /pkg

FROM debian:12-slim
COPY --from=build /pkg/tessera_*.deb /tmp/
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      /tmp/tessera_*.deb curl \
    && rm -rf /var/lib/apt/lists/* /tmp/tessera_*.deb \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin tessera \
    && mkdir /models && chown tessera:tessera /models
ENV TESSERA_MODELS=/models
VOLUME ["/models"]
USER tessera
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/health >/dev/null || exit 1
ENTRYPOINT ["tessera"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
