// Command go_connector is an Aileron connector built by the Go toolchain
// (GOOS=wasip1 GOARCH=wasm), written the way the original project's Go
// connectors are: the standard library only, the aileron_host functions
// imported with //go:wasmimport, the request {op, args} read from stdin and
// ONE JSON object written to stdout. On failure it writes the error object and
// then exits with status 1, as those connectors do.
//
// The host test crates/aileron/tests/it/go_guest.rs drives every operation
// through the daemon; `cargo xtask setup` builds this file into
// connectors/target/go/go_connector.wasm.
//
// Operations:
//
//	echo   returns its args unchanged
//	get    GET args.url through http_request (naming args.credential when
//	       given, e.g. "api_key", so the host injects the bound credential);
//	       reads the body size, then the body, then the status (that order:
//	       the host must keep the last response readable) and returns
//	       {status, body}
//	sleep  time.Sleep(args.ms milliseconds); returns the time it observed
//	fail   reports an external_api_error whose details.status is args.status
//	       (503 when absent), then exits 1
//
// Any other op is answered with the class unknown_op, which is outside the
// host's taxonomy on purpose, like the classes real connectors report.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
	"unsafe"
)

// The aileron_host ABI (SPEC §4.2): every parameter is an i32; pointers
// address this module's own linear memory.

//go:wasmimport aileron_host http_request
func hostHTTPRequest(requestPtr unsafe.Pointer, requestLen uint32) int32

//go:wasmimport aileron_host http_response_status
func hostHTTPResponseStatus() int32

//go:wasmimport aileron_host http_response_size
func hostHTTPResponseSize() int32

//go:wasmimport aileron_host http_response_read
func hostHTTPResponseRead(destinationPtr unsafe.Pointer, destinationLen uint32) int32

//go:wasmimport aileron_host log
func hostLog(levelPtr unsafe.Pointer, levelLen uint32, messagePtr unsafe.Pointer, messageLen uint32)

// request is what the host writes to stdin.
type request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// connectorError is the error object of the output protocol.
type connectorError struct {
	Class   string         `json:"class"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *connectorError) Error() string { return e.Class + ": " + e.Message }

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		exitWith(&connectorError{Class: "bad_input", Message: "reading stdin: " + err.Error()})
	}
	var req request
	if err := json.Unmarshal(input, &req); err != nil {
		exitWith(&connectorError{Class: "bad_input", Message: "stdin is not {op, args}: " + err.Error()})
	}
	logLine("info", "go connector op "+req.Op)
	output, cerr := dispatch(req.Op, req.Args)
	if cerr != nil {
		exitWith(cerr)
	}
	writeObject(map[string]any{"output": output})
}

// extraOps are operations a build adds in other files (big.go, under the
// `big` build tag, which the benchmark uses to make a connector the size of
// the original project's).
var extraOps = map[string]func(json.RawMessage) (any, *connectorError){}

func dispatch(op string, rawArgs json.RawMessage) (any, *connectorError) {
	switch op {
	case "echo":
		var args any
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, badInput(err)
		}
		return args, nil
	case "get":
		var args struct {
			URL        string `json:"url"`
			Credential string `json:"credential"`
		}
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, badInput(err)
		}
		return get(args.URL, args.Credential)
	case "sleep":
		var args struct {
			Ms int64 `json:"ms"`
		}
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, badInput(err)
		}
		started := time.Now()
		time.Sleep(time.Duration(args.Ms) * time.Millisecond)
		return map[string]any{"slept_ms": time.Since(started).Milliseconds()}, nil
	case "fail":
		args := struct {
			Status int `json:"status"`
		}{Status: 503}
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, badInput(err)
		}
		return nil, &connectorError{
			Class:   "external_api_error",
			Message: fmt.Sprintf("the upstream answered %d", args.Status),
			Details: map[string]any{"status": args.Status},
		}
	default:
		if handler, ok := extraOps[op]; ok {
			return handler(rawArgs)
		}
		return nil, &connectorError{Class: "unknown_op", Message: fmt.Sprintf("unknown op %q", op)}
	}
}

// get issues one GET through the host and reads the response the way the
// original connectors do: size, body, and only then the status.
func get(url, credential string) (any, *connectorError) {
	request := map[string]any{
		"method": "GET",
		"url":    url,
		// Go's http.Header shape: every value is a list.
		"headers": map[string][]string{"Accept": {"application/json"}, "User-Agent": {"aileron-go-connector"}},
	}
	if credential != "" {
		// Only the kind: the host holds the credential and injects it.
		request["credential"] = credential
	}
	envelope, err := json.Marshal(request)
	if err != nil {
		return nil, badInput(err)
	}
	code := hostHTTPRequest(unsafe.Pointer(unsafe.SliceData(envelope)), uint32(len(envelope)))
	runtime.KeepAlive(envelope)
	if code != 0 {
		// A denial is recorded by the host and wins over this object; a real
		// connector cannot tell a denial from a network failure, so it says this.
		return nil, &connectorError{
			Class:   "network_error",
			Message: fmt.Sprintf("http_request returned %d", code),
		}
	}
	size := hostHTTPResponseSize()
	if size < 0 {
		return nil, &connectorError{Class: "network_error", Message: "no response is buffered"}
	}
	body := make([]byte, size)
	read := hostHTTPResponseRead(unsafe.Pointer(unsafe.SliceData(body)), uint32(len(body)))
	runtime.KeepAlive(body)
	if read != size {
		return nil, &connectorError{
			Class:   "network_error",
			Message: fmt.Sprintf("read %d bytes of a %d-byte body", read, size),
		}
	}
	status := hostHTTPResponseStatus()
	return map[string]any{"status": status, "body": string(body)}, nil
}

func badInput(err error) *connectorError {
	return &connectorError{Class: "bad_input", Message: "invalid args: " + err.Error()}
}

func logLine(level, message string) {
	levelBytes, messageBytes := []byte(level), []byte(message)
	hostLog(unsafe.Pointer(unsafe.SliceData(levelBytes)), uint32(len(levelBytes)),
		unsafe.Pointer(unsafe.SliceData(messageBytes)), uint32(len(messageBytes)))
	runtime.KeepAlive(levelBytes)
	runtime.KeepAlive(messageBytes)
}

// writeObject writes the one JSON object of the output protocol.
func writeObject(object map[string]any) {
	encoded, err := json.Marshal(object)
	if err != nil {
		encoded = []byte(`{"error":{"class":"connector_runtime_error","message":"output is not JSON"}}`)
	}
	os.Stdout.Write(encoded)
}

// exitWith writes the error object, then exits 1 as the original connectors do.
func exitWith(err *connectorError) {
	writeObject(map[string]any{"error": err})
	os.Exit(1)
}
