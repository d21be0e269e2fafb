// Package docs holds the specification the code cites by rule id
// (RULES.md) and the line protocol (PROTOCOL.md), copies of the shared
// spec kept in step by its test.
package docs
