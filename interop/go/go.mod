module github.com/basalt-db/basalt/interop

go 1.22

require github.com/basho/riak-go-client v1.7.1-0.20170327205844-5587c16e0b8b

require (
	github.com/basho/backoff v0.0.0-20150307023525-2ff7c4694083 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
