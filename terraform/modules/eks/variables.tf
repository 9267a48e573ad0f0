variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string

  validation {
    condition     = can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", var.cluster_name))
    error_message = "cluster_name must be 1-100 letters, digits, hyphens and underscores, starting with a letter or digit."
  }
}

variable "kubernetes_version" {
  description = "Kubernetes version; EKS takes the minor version (1.31.4 runs 1.31 with EKS's current patch release)."
  type        = string

  validation {
    condition     = can(regex("^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?$", var.kubernetes_version))
    error_message = "kubernetes_version must look like 1.31 or 1.31.4."
  }
}

variable "subnet_ids" {
  description = "Subnets for the cluster's network interfaces and the nodes (private ones, in at least two availability zones)."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 2
    error_message = "EKS needs subnets in at least two availability zones."
  }
}

variable "public_access_cidrs" {
  description = "IPv4 CIDR blocks that may reach the cluster's public API endpoint."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "instance_type" {
  description = "EC2 instance type of the managed node group. Its architecture (x86_64 or arm64) picks the Amazon Linux 2023 image type."
  type        = string
  default     = "t3.medium"
}

variable "node_count" {
  description = "Number of nodes in the managed node group."
  type        = number
  default     = 2

  validation {
    condition     = var.node_count >= 0 && var.node_count <= 1000 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number between 0 and 1000."
  }
}

variable "iam_name_prefix" {
  description = "Start of the names of the IAM roles and instance profiles (the AWS provider adds a unique suffix). At most 24 characters, so a role's name_prefix stays within the provider's 38. Empty: the first 24 characters of cluster_name."
  type        = string
  default     = ""

  validation {
    condition     = length(var.iam_name_prefix) <= 24 && can(regex("^[A-Za-z0-9+=,.@_-]*$", var.iam_name_prefix))
    error_message = "iam_name_prefix must be at most 24 characters of letters, digits and +=,.@_-."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
