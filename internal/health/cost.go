package health

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

// HoursPerMonth is the hours of the monthly estimate: 365 days × 24 h / 12, as cloud price pages
// count a month.
const HoursPerMonth = 730

// InstanceTypeLabel is the well-known node label naming a node's instance type, set by the
// cloud controller manager (as on EKS, GKE and AKS nodes);
// deprecatedInstanceTypeLabel is its beta name, read when the new one is missing.
const (
	InstanceTypeLabel           = "node.kubernetes.io/instance-type"
	deprecatedInstanceTypeLabel = "beta.kubernetes.io/instance-type"
)

// maxUnpriced is how many unpriced instance types a Cost names.
const maxUnpriced = 8

// maxPriceTableBytes bounds the price table file the manager reads.
const maxPriceTableBytes = 1 << 20

// instanceTypePattern is what an instance type may look like: a label value (at most 63
// characters, alphanumerics and -_. inside).
var instanceTypePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// currencyPattern is a currency code, e.g. USD or EUR.
var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// PriceTable is the platform admin's price list: the hourly price of each instance type in one
// currency (docs/fleet.md#cost). One price per type: the admin lists the prices of the regions and
// contracts they pay.
type PriceTable struct {
	// Currency is an ISO 4217 code, e.g. USD.
	Currency string `json:"currency"`
	// Hourly is the price of one node-hour by instance type, e.g. "t3.medium": 0.0416.
	Hourly map[string]float64 `json:"hourly"`
}

// LoadPriceTable reads a price table from a YAML or JSON file (at most 1 MiB) and checks it.
func LoadPriceTable(path string) (*PriceTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the price table: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPriceTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read the price table %s: %w", path, err)
	}
	if len(raw) > maxPriceTableBytes {
		return nil, fmt.Errorf("the price table %s is larger than %d bytes", path, maxPriceTableBytes)
	}
	p := &PriceTable{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		return nil, fmt.Errorf("the price table %s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("the price table %s: %w", path, err)
	}
	return p, nil
}

// Validate checks the currency and every entry: an instance type that could be a label value
// and a finite price of zero or more.
func (p *PriceTable) Validate() error {
	if !currencyPattern.MatchString(p.Currency) {
		return fmt.Errorf("currency %q is not a three-letter code such as USD", p.Currency)
	}
	if len(p.Hourly) == 0 {
		return errors.New("hourly lists no instance type")
	}
	for t, price := range p.Hourly {
		if !instanceTypePattern.MatchString(t) {
			return fmt.Errorf("instance type %q is not a label value", t)
		}
		if math.IsNaN(price) || math.IsInf(price, 0) || price < 0 {
			return fmt.Errorf("instance type %s: price %v is not a price", t, price)
		}
	}
	return nil
}

// Cost is a cluster's estimated monthly cost.
type Cost struct {
	// Monthly is the sum over the priced nodes of their hourly price × HoursPerMonth.
	Monthly float64
	// Currency is the price table's.
	Currency string
	// PricedNodes and UnpricedNodes count the nodes with a price and those without one (no
	// instance-type label, or a type the table does not list).
	PricedNodes, UnpricedNodes int32
	// UnpricedInstanceTypes are the types the table does not list, sorted, the first 8.
	UnpricedInstanceTypes []string
}

// Partial says whether some nodes are left out of the estimate.
func (c Cost) Partial() bool { return c.UnpricedNodes > 0 }

// Estimate estimates the monthly cost of nodes counted by instance type ("" for nodes without
// one), ok false when there is nothing to say: no table, or no node has a priced type.
func (p *PriceTable) Estimate(instanceTypes map[string]int32) (c Cost, ok bool) {
	if p == nil {
		return Cost{}, false
	}
	c.Currency = p.Currency
	hourly := 0.0
	for t, n := range instanceTypes {
		price, priced := p.Hourly[t]
		if !priced {
			c.UnpricedNodes += n
			if t != "" {
				c.UnpricedInstanceTypes = append(c.UnpricedInstanceTypes, t)
			}
			continue
		}
		c.PricedNodes += n
		hourly += price * float64(n)
	}
	if c.PricedNodes == 0 {
		return Cost{}, false
	}
	slices.Sort(c.UnpricedInstanceTypes)
	c.UnpricedInstanceTypes = c.UnpricedInstanceTypes[:min(len(c.UnpricedInstanceTypes), maxUnpriced)]
	c.Monthly = math.Round(hourly*HoursPerMonth*100) / 100
	return c, true
}

// instanceType returns the instance type of a node with labels, "" when it has none or the
// value is not one (a label value is checked by the API server, but the answer is the cluster's).
func instanceType(labels map[string]string) string {
	t, ok := labels[InstanceTypeLabel]
	if !ok {
		t = labels[deprecatedInstanceTypeLabel]
	}
	if !instanceTypePattern.MatchString(t) {
		return ""
	}
	return t
}
