# The image the cluster launchers run (docs/containers.md): launcher=kubeflow's `launcher.image`
# and launcher=slurm's pyxis `launcher.container_image`. A PyTorch CUDA base image with fsdp-bench
# installed from this source tree; the base image's torch, CUDA, NCCL (and EFA) stay as they are.
#
#   make image                                   # docker or podman, whichever answers; tags fsdp-bench:latest
#   docker build -t fsdp-bench:latest .
#   docker build --build-arg BASE_IMAGE=public.ecr.aws/deep-learning-containers/pytorch:2.14-cu133-amzn2023 \
#     -t fsdp-bench:efa .                        # an AWS Deep Learning Container: EFA + the NCCL OFI plugin
#   docker run --rm fsdp-bench:latest plan model=llama3-8b cluster=p5.48xlarge nodes=1,2,4
#
# The default base: NVIDIA's PyTorch container, release 26.09 (pinned; pass another as BASE_IMAGE).
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:26.09-py3
FROM ${BASE_IMAGE}

# Optional extras and packages, e.g. FSDP_BENCH_EXTRAS=ray, FSDP_BENCH_EXTRA_PACKAGES=s3fs.
ARG FSDP_BENCH_EXTRAS=""
ARG FSDP_BENCH_EXTRA_PACKAGES=""
# The commit this image is built from (`make image` passes it): records name it, as a checkout's would.
ARG GIT_SHA=""
# The account the image runs as; give the owner of your shared results volume where it must match.
ARG UID=10001
ARG GID=10001

LABEL org.opencontainers.image.title="fsdp-bench" \
      org.opencontainers.image.description="Scaling benchmarks for PyTorch FSDP2" \
      org.opencontainers.image.revision="${GIT_SHA}"

ENV FSDP_BENCH_GIT_SHA="${GIT_SHA}" \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/fsdp-bench
COPY . .
# pip under a constraint that pins the base image's torch, then a check that torch is unchanged
# (scripts/install_into_image.sh); the build's scratch files go with the same layer.
# (The build arguments above reach it as environment variables.)
RUN scripts/install_into_image.sh \
    && rm -rf build ./*.egg-info \
    && fsdp-bench --version

# A non-root account with a home (torch.compile and Triton caches) and a writable working folder
# (results_dir defaults to ./results).
RUN groupadd --gid "${GID}" bench \
    && useradd --uid "${UID}" --gid "${GID}" --create-home --shell /bin/bash bench \
    && mkdir -p /workspace \
    && chown "${UID}:${GID}" /workspace
USER ${UID}:${GID}
WORKDIR /workspace

ENTRYPOINT ["fsdp-bench"]
CMD ["--help"]
