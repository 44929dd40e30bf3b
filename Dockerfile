# The manager image: one static binary, nothing else (no base image can be
# pulled here, and none is needed). `make docker-build` builds bin/image/widgethub
# with CGO_ENABLED=0 and uses bin/image as the build context.
FROM scratch
COPY widgethub /widgethub
USER 65532:65532
ENTRYPOINT ["/widgethub"]
