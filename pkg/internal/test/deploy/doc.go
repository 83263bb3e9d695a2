// Package deploy holds MateMemory's deployment files and the tests that validate them:
//
//   - docker/Dockerfile: the container image (one binary running any part with --target,
//     digest-pinned bases, OCI labels, non-root runtime);
//   - compose/: a local cluster (three JetStream nodes, MySQL, the four services);
//   - k8s/: kustomize base, components and overlays for Kubernetes, and the values for the
//     official NATS Helm chart.
//
// The tests parse every file strictly, decode the Kubernetes manifests (after a real
// kustomize build) into the Kubernetes API types with unknown fields refused, feed the NATS
// configuration to nats-server's own parser and the MateMemory settings to pkg/internal/config's
// loader, and check the references between them. The files live in deploy/ at the top
// of the tree; the tests run from there. See docs/operations.md for how the files are used.
package deploy
