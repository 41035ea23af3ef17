# Controller image for the Helm chart (charts/llmkube): docker build -t ghcr.io/llmkube/llmkube-py:0.1.0 .
# The product packages only: the test API server (packaging/testserver) and bench/ stay out.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md objtypes.py ./
COPY api api
COPY app app
COPY controller controller
COPY reconcilers reconcilers
COPY runtimes runtimes
COPY metrics metrics
COPY webhook webhook
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["llmkube-controller"]
CMD ["run"]
