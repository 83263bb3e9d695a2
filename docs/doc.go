// Package docs holds MateMemory's documentation (Markdown) and the test that keeps its links
// and file references resolvable: every relative link and anchor, and every path under a
// top-level folder of the repository named in the text, must exist.
package docs
