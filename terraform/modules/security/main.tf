# Security groups of a self-managed Kubernetes cluster:
#   api           - the Kubernetes API load balancer: 6443 in from api_allowed_cidrs and the NAT
#                   addresses, 6443 out to the control plane only.
#   control_plane - control-plane nodes: 6443 from the load balancer and api_allowed_cidrs,
#                   everything from cluster nodes (etcd, kubelet, Calico IP-in-IP and BGP).
#   workers       - worker nodes: everything from cluster nodes.
# Nodes may reach anything outside.

locals {
  cluster_tag = { "kubernetes.io/cluster/${var.cluster_name}" = "owned" }
}

resource "aws_security_group" "api" {
  name        = "${var.name}-api"
  description = "Kubernetes API load balancer of ${var.cluster_name}"
  vpc_id      = var.vpc_id

  tags = merge(var.tags, { Name = "${var.name}-api" })
}

resource "aws_security_group" "control_plane" {
  name        = "${var.name}-control-plane"
  description = "Kubernetes control-plane nodes of ${var.cluster_name}"
  vpc_id      = var.vpc_id

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.name}-control-plane" })
}

resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "Kubernetes worker nodes of ${var.cluster_name}"
  vpc_id      = var.vpc_id

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.name}-workers" })
}

# --- API load balancer ---

resource "aws_vpc_security_group_ingress_rule" "api_from_allowed" {
  count = length(var.api_allowed_cidrs)

  security_group_id = aws_security_group.api.id
  description       = "Kubernetes API"
  ip_protocol       = "tcp"
  from_port         = 6443
  to_port           = 6443
  cidr_ipv4         = var.api_allowed_cidrs[count.index]

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "api_from_nat" {
  count = length(var.nat_public_cidrs)

  security_group_id = aws_security_group.api.id
  description       = "Kubernetes API from the cluster's own nodes (through NAT)"
  ip_protocol       = "tcp"
  from_port         = 6443
  to_port           = 6443
  cidr_ipv4         = var.nat_public_cidrs[count.index]

  tags = var.tags
}

resource "aws_vpc_security_group_egress_rule" "api_to_control_plane" {
  security_group_id            = aws_security_group.api.id
  description                  = "Forwarding and health checks to the API servers"
  ip_protocol                  = "tcp"
  from_port                    = 6443
  to_port                      = 6443
  referenced_security_group_id = aws_security_group.control_plane.id

  tags = var.tags
}

# --- Control plane ---

resource "aws_vpc_security_group_ingress_rule" "control_plane_api_from_allowed" {
  count = length(var.api_allowed_cidrs)

  security_group_id = aws_security_group.control_plane.id
  description       = "Kubernetes API (control-plane nodes with a public address)"
  ip_protocol       = "tcp"
  from_port         = 6443
  to_port           = 6443
  cidr_ipv4         = var.api_allowed_cidrs[count.index]

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "control_plane_api_from_lb" {
  security_group_id            = aws_security_group.control_plane.id
  description                  = "Kubernetes API from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = 6443
  to_port                      = 6443
  referenced_security_group_id = aws_security_group.api.id

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "control_plane_from_control_plane" {
  security_group_id            = aws_security_group.control_plane.id
  description                  = "Control plane to control plane (etcd, API, kubelet, CNI)"
  ip_protocol                  = "-1"
  referenced_security_group_id = aws_security_group.control_plane.id

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "control_plane_from_workers" {
  security_group_id            = aws_security_group.control_plane.id
  description                  = "Workers to control plane (API, CNI)"
  ip_protocol                  = "-1"
  referenced_security_group_id = aws_security_group.workers.id

  tags = var.tags
}

resource "aws_vpc_security_group_egress_rule" "control_plane_all" {
  security_group_id = aws_security_group.control_plane.id
  description       = "Anything outside"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"

  tags = var.tags
}

# --- Workers ---

resource "aws_vpc_security_group_ingress_rule" "workers_from_control_plane" {
  security_group_id            = aws_security_group.workers.id
  description                  = "Control plane to workers (kubelet, webhooks, CNI)"
  ip_protocol                  = "-1"
  referenced_security_group_id = aws_security_group.control_plane.id

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "workers_from_workers" {
  security_group_id            = aws_security_group.workers.id
  description                  = "Worker to worker (pods, CNI)"
  ip_protocol                  = "-1"
  referenced_security_group_id = aws_security_group.workers.id

  tags = var.tags
}

resource "aws_vpc_security_group_egress_rule" "workers_all" {
  security_group_id = aws_security_group.workers.id
  description       = "Anything outside"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"

  tags = var.tags
}
