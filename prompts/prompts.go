// Package prompts embeds MateMemory's prompt templates: <group>/<name>.<lang>.md, with
// {{variable}} placeholders rendered in one pass by pkg/internal/prompt.
package prompts

import "embed"

// FS holds the templates.
//
//go:embed memory context
var FS embed.FS
