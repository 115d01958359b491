// Package pb holds the protobuf equivalents of the gen records RelayV1 and
// ReservationV1 that the codec benchmarks compare against.
//
// records.pb.go is generated and committed, so building and testing need no
// protoc. Regenerating needs protoc and protoc-gen-go v1.36.12 on PATH (see
// ../Makefile, target proto).
package pb

//go:generate protoc --go_out=. --go_opt=paths=source_relative records.proto
