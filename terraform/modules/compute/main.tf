# Nodes of a self-managed (kubeadm) Kubernetes cluster on EC2:
#   - control_plane_count control-plane instances. With enable_self_bootstrap_control_plane their
#     user_data bootstraps the cluster itself: node 0 runs kubeadm init and publishes the join
#     credentials and the admin kubeconfig to SSM; node i > 0 waits for
#     <prefix>/control_plane_joined/<i-1> and joins with --control-plane, so etcd members are added
#     one at a time.
#   - a workers' Auto Scaling group whose instances join with what SSM holds.
#   - an instance profile per role with the SSM and cloud-controller permissions they use.

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

data "aws_ec2_instance_type" "this" {
  instance_type = var.instance_type
}

data "aws_ami" "ubuntu" {
  count = var.ami_id == "" ? 1 : 0

  most_recent = true
  owners      = ["099720109477"] # Canonical

  filter {
    name   = "name"
    values = ["ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${local.ubuntu_arch}-server-*"]
  }

  filter {
    name   = "virtualization-type"
    values = ["hvm"]
  }
}

locals {
  ubuntu_arch = contains(data.aws_ec2_instance_type.this.supported_architectures, "arm64") ? "arm64" : "amd64"
  ami_id      = var.ami_id != "" ? var.ami_id : data.aws_ami.ubuntu[0].id

  version_parts      = split(".", trimprefix(var.kubernetes_version, "v"))
  kubernetes_minor   = "${local.version_parts[0]}.${local.version_parts[1]}"
  kubernetes_release = length(local.version_parts) > 2 ? join(".", local.version_parts) : ""

  # Newest AWS cloud controller manager release of each Kubernetes minor version.
  ccm_releases = {
    "1.28" = "v1.28.11"
    "1.29" = "v1.29.10"
    "1.30" = "v1.30.10"
    "1.31" = "v1.31.9"
    "1.32" = "v1.32.8"
    "1.33" = "v1.33.4"
    "1.34" = "v1.34.3"
    "1.35" = "v1.35.2"
    "1.36" = "v1.36.1"
  }
  ccm_version = var.aws_ccm_version != "" ? var.aws_ccm_version : lookup(local.ccm_releases, local.kubernetes_minor, "v1.36.1")

  ssm_parameter_arns = "arn:${data.aws_partition.current.partition}:ssm:${var.region}:${data.aws_caller_identity.current.account_id}:parameter${var.ssm_parameter_prefix}/*"
  cluster_tag        = { "kubernetes.io/cluster/${var.cluster_name}" = "owned" }
  iam_prefix         = var.iam_name_prefix != "" ? var.iam_name_prefix : substr(var.name, 0, 24)

  control_plane_subnet_ids = var.control_plane_public_endpoint ? var.public_subnet_ids : var.private_subnet_ids

  # What nodes join: the override (a load balancer) or node 0's private address. What the admin
  # kubeconfig names: the override, or node 0's public or private address.
  join_host     = var.control_plane_endpoint_override != "" ? var.control_plane_endpoint_override : aws_instance.control_plane[0].private_ip
  node0_address = var.control_plane_public_endpoint ? aws_instance.control_plane[0].public_ip : aws_instance.control_plane[0].private_ip
  api_host      = var.control_plane_endpoint_override != "" ? var.control_plane_endpoint_override : local.node0_address

  # The placeholder keeps the node's OS only; the bootstrap builds or joins the cluster.
  control_plane_template = var.enable_self_bootstrap_control_plane ? "control_plane_bootstrap" : "control_plane_placeholder"

  node_setup = templatefile("${path.module}/templates/node_setup.sh.tftpl", {
    region             = var.region
    ssm_prefix         = var.ssm_parameter_prefix
    kubernetes_minor   = local.kubernetes_minor
    kubernetes_release = local.kubernetes_release
  })
}

# --- Bootstrap parameters owned by this module ---

resource "aws_ssm_parameter" "control_plane_joined" {
  count = var.control_plane_count

  name        = "${var.ssm_parameter_prefix}/control_plane_joined/${count.index}"
  description = "Set by control-plane node ${count.index} once it is part of the cluster; node ${count.index + 1} waits for it."
  type        = "String"
  value       = "PENDING"

  tags = var.tags

  lifecycle {
    ignore_changes = [value]
  }
}

resource "aws_ssm_parameter" "k8s_api_endpoint" {
  name        = "${var.ssm_parameter_prefix}/k8s_api_endpoint"
  description = "host:port of the Kubernetes API that nodes join."
  type        = "String"
  value       = "${local.join_host}:6443"

  tags = var.tags
}

# --- IAM ---

data "aws_iam_policy_document" "ec2_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "control_plane" {
  statement {
    sid       = "BootstrapParameters"
    actions   = ["ssm:GetParameter", "ssm:PutParameter"]
    resources = [local.ssm_parameter_arns]
  }

  # What kubernetes/cloud-provider-aws documents for the cloud controller manager.
  statement {
    sid = "CloudControllerManager"
    actions = [
      "autoscaling:DescribeAutoScalingGroups",
      "autoscaling:DescribeLaunchConfigurations",
      "autoscaling:DescribeTags",
      "ec2:DescribeInstances",
      "ec2:DescribeRegions",
      "ec2:DescribeRouteTables",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSubnets",
      "ec2:DescribeVolumes",
      "ec2:DescribeAvailabilityZones",
      "ec2:DescribeVpcs",
      "ec2:DescribeInstanceTopology",
      "ec2:CreateSecurityGroup",
      "ec2:CreateTags",
      "ec2:CreateVolume",
      "ec2:ModifyInstanceAttribute",
      "ec2:ModifyVolume",
      "ec2:AttachVolume",
      "ec2:AuthorizeSecurityGroupIngress",
      "ec2:CreateRoute",
      "ec2:DeleteRoute",
      "ec2:DeleteSecurityGroup",
      "ec2:DeleteVolume",
      "ec2:DetachVolume",
      "ec2:RevokeSecurityGroupIngress",
      "elasticloadbalancing:AddTags",
      "elasticloadbalancing:ApplySecurityGroupsToLoadBalancer",
      "elasticloadbalancing:AttachLoadBalancerToSubnets",
      "elasticloadbalancing:ConfigureHealthCheck",
      "elasticloadbalancing:CreateListener",
      "elasticloadbalancing:CreateLoadBalancer",
      "elasticloadbalancing:CreateLoadBalancerListeners",
      "elasticloadbalancing:CreateLoadBalancerPolicy",
      "elasticloadbalancing:CreateTargetGroup",
      "elasticloadbalancing:DeleteListener",
      "elasticloadbalancing:DeleteLoadBalancer",
      "elasticloadbalancing:DeleteLoadBalancerListeners",
      "elasticloadbalancing:DeleteTargetGroup",
      "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
      "elasticloadbalancing:DeregisterTargets",
      "elasticloadbalancing:DescribeListeners",
      "elasticloadbalancing:DescribeLoadBalancerAttributes",
      "elasticloadbalancing:DescribeLoadBalancerPolicies",
      "elasticloadbalancing:DescribeLoadBalancers",
      "elasticloadbalancing:DescribeTargetGroups",
      "elasticloadbalancing:DescribeTargetHealth",
      "elasticloadbalancing:DetachLoadBalancerFromSubnets",
      "elasticloadbalancing:ModifyListener",
      "elasticloadbalancing:ModifyLoadBalancerAttributes",
      "elasticloadbalancing:ModifyTargetGroup",
      "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
      "elasticloadbalancing:RegisterTargets",
      "elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer",
      "elasticloadbalancing:SetLoadBalancerPoliciesOfListener",
      "iam:CreateServiceLinkedRole",
      "kms:DescribeKey",
    ]
    resources = ["*"]
  }
}

data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "BootstrapParameters"
    actions   = ["ssm:GetParameter"]
    resources = [local.ssm_parameter_arns]
  }

  statement {
    sid = "Node"
    actions = [
      "ec2:DescribeInstances",
      "ec2:DescribeRegions",
      "ecr:GetAuthorizationToken",
      "ecr:BatchCheckLayerAvailability",
      "ecr:GetDownloadUrlForLayer",
      "ecr:GetRepositoryPolicy",
      "ecr:DescribeRepositories",
      "ecr:ListImages",
      "ecr:BatchGetImage",
    ]
    resources = ["*"]
  }
}

resource "aws_iam_role" "control_plane" {
  name_prefix        = "${local.iam_prefix}-cp-"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume_role.json

  tags = var.tags
}

resource "aws_iam_role_policy" "control_plane" {
  name   = "kubernetes-control-plane"
  role   = aws_iam_role.control_plane.id
  policy = data.aws_iam_policy_document.control_plane.json
}

resource "aws_iam_role_policy_attachment" "control_plane_ssm_managed" {
  role       = aws_iam_role.control_plane.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "control_plane" {
  name_prefix = "${local.iam_prefix}-cp-"
  role        = aws_iam_role.control_plane.name

  tags = var.tags
}

resource "aws_iam_role" "worker" {
  name_prefix        = "${local.iam_prefix}-worker-"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume_role.json

  tags = var.tags
}

resource "aws_iam_role_policy" "worker" {
  name   = "kubernetes-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_role_policy_attachment" "worker_ssm_managed" {
  role       = aws_iam_role.worker.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "worker" {
  name_prefix = "${local.iam_prefix}-worker-"
  role        = aws_iam_role.worker.name

  tags = var.tags
}

# --- Control plane ---

resource "aws_instance" "control_plane" {
  count = var.control_plane_count

  ami                         = local.ami_id
  instance_type               = var.instance_type
  subnet_id                   = local.control_plane_subnet_ids[count.index % length(local.control_plane_subnet_ids)]
  associate_public_ip_address = var.control_plane_public_endpoint
  vpc_security_group_ids      = [var.control_plane_security_group_id]
  iam_instance_profile        = aws_iam_instance_profile.control_plane.name

  user_data = templatefile("${path.module}/templates/${local.control_plane_template}.sh.tftpl", {
    cluster_name      = var.cluster_name
    node_index        = count.index
    node_setup        = local.node_setup
    endpoint_override = var.control_plane_endpoint_override
    public_endpoint   = var.control_plane_public_endpoint
    pod_cidr          = var.pod_cidr
    calico_version    = var.calico_version
    ccm_version       = local.ccm_version
    worker_count      = var.worker_count
  })

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  root_block_device {
    volume_size = var.root_volume_size
    volume_type = "gp3"
    encrypted   = true
  }

  volume_tags = merge(var.tags, { Name = "${var.name}-control-plane-${count.index}" })

  tags = merge(var.tags, local.cluster_tag, {
    Name                = "${var.name}-control-plane-${count.index}"
    "kubeopera.io/role" = "control-plane"
  })

  lifecycle {
    # A newer image or a changed script must not replace a running control-plane node: etcd
    # membership is not Terraform's to reshuffle.
    ignore_changes = [ami, user_data]
  }

  # Every parameter a node writes exists (seeded PENDING) before any node boots.
  depends_on = [aws_ssm_parameter.control_plane_joined]
}

# --- Workers ---

resource "aws_launch_template" "worker" {
  name_prefix            = "${var.name}-worker-"
  image_id               = local.ami_id
  instance_type          = var.instance_type
  vpc_security_group_ids = [var.worker_security_group_id]
  update_default_version = true

  user_data = base64encode(templatefile("${path.module}/templates/worker_bootstrap.sh.tftpl", {
    node_setup = local.node_setup
  }))

  iam_instance_profile {
    name = aws_iam_instance_profile.worker.name
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  block_device_mappings {
    device_name = "/dev/sda1" # Ubuntu's root device

    ebs {
      volume_size           = var.root_volume_size
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { Name = "${var.name}-worker" })
  }

  tags = var.tags
}

resource "aws_autoscaling_group" "workers" {
  name                = "${var.name}-workers"
  min_size            = var.worker_count
  max_size            = max(var.worker_count, 1)
  desired_capacity    = var.worker_count
  vpc_zone_identifier = var.private_subnet_ids
  health_check_type   = "EC2"

  launch_template {
    id      = aws_launch_template.worker.id
    version = aws_launch_template.worker.latest_version
  }

  dynamic "tag" {
    for_each = merge(var.tags, local.cluster_tag, {
      Name                = "${var.name}-worker"
      "kubeopera.io/role" = "worker"
    })

    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  # Workers read the endpoint from SSM and wait there for the join credentials.
  depends_on = [aws_ssm_parameter.k8s_api_endpoint]
}
