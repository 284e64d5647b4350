package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A round trip over AMQPS with Go's amqp091 client (tests/clients/test_clients_tls_go.py).
//
// usage: tlsprobe URL CA CERT KEY MODE
//   CA: the CA the server certificate is verified against; CERT, KEY: the client certificate
//   ("-" for none); MODE: "plain" (the URL's user and password) or "external" (SASL EXTERNAL).
// Prints "got <body>" after publishing to and consuming from a server-named queue, or
// "error <step>: <reason>" and exits 1.
func main() {
	url, caFile, certFile, keyFile, mode := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		fail("read ca", err)
	}
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if certFile != "-" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			fail("load client cert", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	config := amqp.Config{TLSClientConfig: cfg, Heartbeat: 10 * time.Second}
	if mode == "external" {
		config.SASL = []amqp.Authentication{&amqp.ExternalAuth{}}
	}
	conn, err := amqp.DialConfig(url, config)
	if err != nil {
		fail("dial", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		fail("channel", err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		fail("declare", err)
	}
	if err := ch.Publish("", q.Name, false, false, amqp.Publishing{Body: []byte("over tls from go")}); err != nil {
		fail("publish", err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		fail("consume", err)
	}
	select {
	case m := <-msgs:
		fmt.Printf("got %s\n", m.Body)
	case <-time.After(5 * time.Second):
		fail("consume", fmt.Errorf("timeout"))
	}
}

func fail(what string, err error) {
	fmt.Printf("error %s: %v\n", what, err)
	os.Exit(1)
}
