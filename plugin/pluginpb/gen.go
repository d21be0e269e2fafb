// Package pluginpb holds the generated gRPC code of the plugin wire protocol
// (tools.proto). It is committed so that building needs no protoc.
package pluginpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative tools.proto
