# kopfsched: `kopfsched run` in a cluster (see manifests/05-deployment.yaml).
# The builder installs the package and its dependencies (all published as wheels)
# into a virtualenv; the final stage copies only that virtualenv onto the same slim
# base: no compilers, no pip cache, no build context.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/kopfsched
COPY pyproject.toml README.md ./
COPY operator ./operator
# Build a wheel of kopfsched, then install it (and its pinned dependencies) into the venv.
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/kopfsched/bin/pip install --no-cache-dir /wheels/kopfsched-*.whl \
 && /opt/kopfsched/bin/kopfsched --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kopfsched" \
      org.opencontainers.image.description="kube-scheduler's scheduling framework as a Python asyncio operator on kopf" \
      org.opencontainers.image.source="https://github.com/kopfsched/kopfsched" \
      org.opencontainers.image.licenses="Apache-2.0"
# The root filesystem is read-only in the cluster: bytecode is compiled at build time.
ENV PATH=/opt/kopfsched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 kopfsched \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin kopfsched
COPY --from=builder /opt/kopfsched /opt/kopfsched
USER 10001:10001
EXPOSE 10259
ENTRYPOINT ["kopfsched"]
CMD ["run"]
