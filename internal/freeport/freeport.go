// Package freeport picks ports for test fleets that restart nodes on the
// same address.
//
// A port the kernel handed out for ":0" lies in its ephemeral range, which
// it also draws from for the source port of every outgoing connection: once
// a node on such a port stops, any process's next connection may take the
// port, and the node cannot bind it again when it restarts ("address
// already in use"). Ports picked here lie outside that range, so only
// another listener can take them.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// given holds the ports already handed out in this process, so callers
// picking one port at a time never get the same one twice.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Pick returns n distinct ports on ip, each free for both TCP and UDP
// (gossip uses both) and outside the kernel's ephemeral port range. Every
// port stays held until all n are picked.
func Pick(ip net.IP, n int) ([]int, error) {
	lo, hi := pickRange()
	var ports []int
	var held []func() error
	defer func() {
		for _, c := range held {
			c()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 200*n {
			return nil, fmt.Errorf("found only %d of %d free ports in %d-%d", len(ports), n, lo, hi)
		}
		port := lo + rand.IntN(hi-lo+1)
		given.Lock()
		taken := given.ports[port]
		given.Unlock()
		if taken {
			continue
		}
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
		if err != nil {
			continue
		}
		held = append(held, ln.Close)
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
		if err != nil {
			continue
		}
		held = append(held, pc.Close)
		ports = append(ports, port)
	}
	given.Lock()
	for _, p := range ports {
		given.ports[p] = true
	}
	given.Unlock()
	return ports, nil
}

// Addrs is Pick as host:port strings on 127.0.0.1.
func Addrs(n int) ([]string, error) {
	ports, err := Pick(net.IPv4(127, 0, 0, 1), n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// pickRange is the range to pick from: below the ephemeral range when there
// is room, else above it.
func pickRange() (lo, hi int) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		elo, ehi = 32768, 60999 // Linux's default
	}
	if elo-1 >= 12000 {
		return 10000, elo - 1
	}
	return ehi + 1, 65535
}

func ephemeralRange() (lo, hi int, err error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, errors.New("unexpected ip_local_port_range")
	}
	if lo, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	if hi, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}
