// Package deploy holds how yuebing is deployed: the container image's
// Dockerfile and the Kubernetes manifests under kubernetes/. It has no code;
// its tests decode every manifest strictly into the Kubernetes API types, so
// a misspelled field fails, and check that the manifests agree with each
// other and the Dockerfile with what the image must be.
package deploy
