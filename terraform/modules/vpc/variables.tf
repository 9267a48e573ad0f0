variable "name" {
  description = "Name of the network; prefixes every resource's Name tag."
  type        = string
}

variable "cluster_name" {
  description = "Kubernetes cluster using the network: subnets get the kubernetes.io/cluster/<name> tag the AWS cloud provider and EKS look for. Empty for none."
  type        = string
  default     = ""
}

variable "cidr_block" {
  description = "IPv4 CIDR block of the VPC (/16 to /24). Each subnet gets a sixteenth of it: public ones the first six, private ones from the ninth on."
  type        = string
  default     = "10.0.0.0/16"

  validation {
    condition     = can(cidrhost(var.cidr_block, 0)) && can(regex("^[0-9.]+/(1[6-9]|2[0-4])$", var.cidr_block))
    error_message = "cidr_block must be an IPv4 CIDR block between /16 and /24."
  }
}

variable "az_count" {
  description = "Number of availability zones to spread the subnets over (EKS needs at least 2)."
  type        = number
  default     = 2

  validation {
    condition     = var.az_count >= 2 && var.az_count <= 6
    error_message = "az_count must be between 2 and 6."
  }
}

variable "single_nat_gateway" {
  description = "One NAT gateway for every private subnet (cheaper) instead of one per availability zone."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
