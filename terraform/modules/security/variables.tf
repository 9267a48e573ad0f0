variable "name" {
  description = "Prefix of the security groups' names."
  type        = string
}

variable "cluster_name" {
  description = "Kubernetes cluster the nodes belong to: the node groups carry kubernetes.io/cluster/<name> = owned, which the AWS cloud controller manager uses to find the group to open for Service load balancers."
  type        = string
}

variable "vpc_id" {
  description = "VPC the security groups belong to."
  type        = string
}

variable "api_allowed_cidrs" {
  description = "IPv4 CIDR blocks allowed to reach the Kubernetes API (6443) on the API load balancer and on control-plane nodes that have a public address."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = alltrue([for c in var.api_allowed_cidrs : can(cidrhost(c, 0))])
    error_message = "api_allowed_cidrs must hold IPv4 CIDR blocks."
  }
}

variable "nat_public_cidrs" {
  description = "The VPC's NAT addresses (/32): nodes in private subnets reach a public API load balancer from there, so they are let in even when api_allowed_cidrs is narrower."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
