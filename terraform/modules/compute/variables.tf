variable "name" {
  description = "Prefix of every resource's name."
  type        = string
}

variable "cluster_name" {
  description = "Kubernetes cluster name: instances carry kubernetes.io/cluster/<name> = owned for the AWS cloud controller manager."
  type        = string
}

variable "region" {
  description = "AWS region the cluster runs in (the nodes' AWS CLI calls and the SSM parameter ARNs)."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets for workers, and for control-plane nodes unless control_plane_public_endpoint is set."
  type        = list(string)

  validation {
    condition     = length(var.private_subnet_ids) > 0
    error_message = "private_subnet_ids must name at least one subnet."
  }
}

variable "public_subnet_ids" {
  description = "Public subnets, used for control-plane nodes when control_plane_public_endpoint is set."
  type        = list(string)
  default     = []
}

variable "control_plane_security_group_id" {
  description = "Security group of the control-plane nodes."
  type        = string
}

variable "worker_security_group_id" {
  description = "Security group of the worker nodes."
  type        = string
}

variable "instance_type" {
  description = "EC2 instance type of every node. Its architecture (x86_64 or arm64) picks the Ubuntu image."
  type        = string
  default     = "t3.medium"
}

variable "ami_id" {
  description = "Image for every node; empty for the newest Ubuntu 24.04 LTS image of the instance type's architecture. The bootstrap scripts need an Ubuntu (apt, systemd, cloud-init) image."
  type        = string
  default     = ""
}

variable "root_volume_size" {
  description = "Root volume size of every node, in GiB."
  type        = number
  default     = 50
}

variable "kubernetes_version" {
  description = "Kubernetes version: 1.31 installs the newest 1.31 patch release, 1.31.4 exactly that one."
  type        = string

  validation {
    condition     = can(regex("^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?$", var.kubernetes_version))
    error_message = "kubernetes_version must look like 1.31 or 1.31.4."
  }
}

variable "control_plane_count" {
  description = "Number of control-plane nodes. More than one needs control_plane_endpoint_override (a load balancer in front of them)."
  type        = number
  default     = 1

  validation {
    condition     = var.control_plane_count >= 1 && var.control_plane_count <= 7 && floor(var.control_plane_count) == var.control_plane_count
    error_message = "control_plane_count must be a whole number between 1 and 7."
  }
}

variable "worker_count" {
  description = "Number of worker nodes in the workers' Auto Scaling group. With none, control-plane nodes take workloads (their NoSchedule taint is removed)."
  type        = number
  default     = 2

  validation {
    condition     = var.worker_count >= 0 && var.worker_count <= 1000 && floor(var.worker_count) == var.worker_count
    error_message = "worker_count must be a whole number between 0 and 1000."
  }
}

variable "enable_self_bootstrap_control_plane" {
  description = "Control-plane nodes bootstrap the cluster from their own user_data (kubeadm init or join, Calico, the AWS cloud controller manager) and publish the join credentials and the admin kubeconfig to SSM. When false, user_data is a placeholder and the bootstrap is driven from outside (a bastion); workers self-join from SSM either way."
  type        = bool
  default     = false
}

variable "control_plane_endpoint_override" {
  description = "Host name or address of the Kubernetes API (port 6443) nodes join and the admin kubeconfig names, e.g. a load balancer's DNS name. Empty: control-plane node 0's address. Required when control_plane_count > 1, so the cluster's endpoint is not a single node."
  type        = string
  default     = ""

  validation {
    condition     = var.control_plane_count <= 1 || trimspace(var.control_plane_endpoint_override) != ""
    error_message = "control_plane_endpoint_override is required when control_plane_count > 1 (put a load balancer in front of the control-plane nodes and pass its DNS name)."
  }

  validation {
    condition     = can(regex("^[A-Za-z0-9.-]*$", var.control_plane_endpoint_override))
    error_message = "control_plane_endpoint_override must be a bare host name or IPv4 address (no scheme, no port)."
  }
}

variable "control_plane_public_endpoint" {
  description = "Place control-plane nodes in public subnets with a public address; without control_plane_endpoint_override, the admin kubeconfig then names node 0's public address (nodes still join on its private one)."
  type        = bool
  default     = false

  validation {
    condition     = !var.control_plane_public_endpoint || length(var.public_subnet_ids) > 0
    error_message = "control_plane_public_endpoint needs public_subnet_ids."
  }
}

variable "ssm_parameter_prefix" {
  description = "SSM path the bootstrap parameters live under, e.g. /kubeopera/<cluster>: join_token, ca_cert_hash, k8s_certificate_key and admin_kubeconfig (created by the caller, seeded PENDING), k8s_api_endpoint and control_plane_joined/<index> (created here)."
  type        = string

  validation {
    condition     = can(regex("^(/[A-Za-z0-9_.-]+)+$", var.ssm_parameter_prefix))
    error_message = "ssm_parameter_prefix must be an absolute SSM path without a trailing slash, e.g. /kubeopera/my-cluster."
  }
}

variable "pod_cidr" {
  description = "Pod network CIDR (kubeadm --pod-network-cidr, Calico's default IP pool). Must not overlap the VPC."
  type        = string
  default     = "192.168.0.0/16"
}

variable "calico_version" {
  description = "Calico release whose manifests/calico.yaml is applied."
  type        = string
  default     = "v3.29.3"
}

variable "aws_ccm_version" {
  description = "AWS cloud controller manager release (kubernetes/cloud-provider-aws tag and image tag). Empty: the release matching the Kubernetes minor version."
  type        = string
  default     = ""
}

variable "iam_name_prefix" {
  description = "Start of the names of the IAM roles and instance profiles (the AWS provider adds a unique suffix). At most 24 characters, so a role's name_prefix stays within the provider's 38. Empty: the first 24 characters of name."
  type        = string
  default     = ""

  validation {
    condition     = length(var.iam_name_prefix) <= 24 && can(regex("^[A-Za-z0-9+=,.@_-]*$", var.iam_name_prefix))
    error_message = "iam_name_prefix must be at most 24 characters of letters, digits and +=,.@_-."
  }
}

variable "tags" {
  description = "Tags for every resource, propagated to instances and volumes."
  type        = map(string)
  default     = {}
}
