// Package api holds the wire types of MateMemory's REST API that the server's handlers
// answer with and the Go client (pkg/client) decodes: one description of each body, so the
// two cannot drift. It depends on the standard library only. The OpenAPI document is
// generated from these types (their json names and the doc and example tags), under the
// component names it always had (WorkspaceFile, CronjobJob, …).
package api
