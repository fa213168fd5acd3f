//go:build big

// The `big` build of the Go connector: the same operations plus one that
// uses the packages real Go connectors link (net/textproto and net/url to build requests,
// text/template and html escaping for message bodies, regexp, encoding/xml,
// compress/gzip, HMAC, math/big, mime/multipart), so the module is the size
// of the original project's connectors (5-8 MB of wasm) rather than a toy's.
// `cargo xtask bench` builds it with `go build -tags big` to measure compile,
// cache and call costs at real-world size; the tests use the default build.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"html"
	"math/big"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"text/template"
)

func init() {
	extraOps["render"] = render
}

// render builds, from args {url, text}, what a connector prepares before a
// call: a templated body, an escaped HTML copy, a form, a signed and
// compressed payload, and the HTTP request itself; it returns their digests.
func render(rawArgs json.RawMessage) (any, *connectorError) {
	var args struct {
		URL  string `json:"url"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil {
		return nil, badInput(err)
	}
	parsed, err := url.Parse(args.URL)
	if err != nil {
		return nil, badInput(err)
	}
	var body bytes.Buffer
	message := template.Must(template.New("message").Parse("{{.Text}} ({{.Host}})"))
	if err := message.Execute(&body, map[string]string{"Text": args.Text, "Host": parsed.Host}); err != nil {
		return nil, badInput(err)
	}
	escaped := "<p>" + html.EscapeString(args.Text) + "</p>"
	words := regexp.MustCompile(`[A-Za-z]+`).FindAllString(args.Text, -1)
	var form bytes.Buffer
	parts := multipart.NewWriter(&form)
	_ = parts.WriteField("text", body.String())
	_ = parts.Close()
	var compressed bytes.Buffer
	zipper := gzip.NewWriter(&compressed)
	_, _ = zipper.Write(form.Bytes())
	_ = zipper.Close()
	mac := hmac.New(sha256.New, []byte(parsed.Host))
	mac.Write(compressed.Bytes())
	headers := textproto.MIMEHeader{}
	headers.Set("content-type", parts.FormDataContentType())
	headers.Set("content-length", strings.TrimSpace(strings.Repeat(" ", 1)+fmtLength(body.Len())))
	var wire bytes.Buffer
	wire.WriteString("POST " + parsed.RequestURI() + " HTTP/1.1\r\nHost: " + parsed.Host + "\r\n")
	for name, values := range headers {
		for _, value := range values {
			wire.WriteString(name + ": " + value + "\r\n")
		}
	}
	wire.WriteString("\r\n" + body.String())
	var table bytes.Buffer
	rows := csv.NewWriter(&table)
	_ = rows.Write(words)
	rows.Flush()
	var document bytes.Buffer
	_ = xml.NewEncoder(&document).Encode(struct {
		XMLName xml.Name `xml:"message"`
		Text    string   `xml:"text"`
	}{Text: args.Text})
	product := new(big.Int).SetBytes(mac.Sum(nil))
	return map[string]any{
		"body":      body.String(),
		"html":      escaped,
		"words":     len(words),
		"request":   hex.EncodeToString(sha256.New().Sum(wire.Bytes())[:8]),
		"signature": base64.StdEncoding.EncodeToString(mac.Sum(nil)),
		"csv":       table.String(),
		"xml":       document.String(),
		"bits":      product.BitLen(),
	}, nil
}

func fmtLength(n int) string { return new(big.Int).SetInt64(int64(n)).String() }
